module.exports = function (output, context) {
  return output.trim() + ' [' + context.vars.word + ']';
};
module.exports.shout = (output) => output.toUpperCase();
