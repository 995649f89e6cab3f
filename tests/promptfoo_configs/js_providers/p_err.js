module.exports = class { id() { return 'err'; } async callApi(p, ctx) {
  if (ctx.vars.mode === 'throw') throw new Error('boom from provider');
  if (ctx.vars.mode === 'error') return { error: 'told error' };
  if (ctx.vars.mode === 'string') return 'just a string';
  if (ctx.vars.mode === 'undef') return undefined;
  return { output: {nested: 1} }; } };
