module.exports = (context) => 'JS ' + JSON.stringify(context.provider) + ' ' + Object.keys(context).join(',');
