module.exports = class { constructor(o) { this.o = o; } id() { return this.o.id || 'cjs'; } async callApi(p) { return { output: 'CJS ' + p }; } };
