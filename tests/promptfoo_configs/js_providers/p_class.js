// A provider class as users write them for promptfoo: made once with {id, config, env}, callApi per row.
class EchoProvider {
  constructor(options) {
    this.providerId = options.id || 'echo-class';
    this.config = options.config;
    this.calls = 0;
  }

  id() {
    return this.providerId;
  }

  async callApi(prompt, context) {
    this.calls += 1; // one instance for the run: state lasts
    const vars = Object.fromEntries(Object.entries(context.vars).filter(([k]) => !k.startsWith('__')));
    return {
      output: JSON.stringify({ prompt, config: this.config, vars, raw: context.prompt.raw, promptLabel: context.prompt.label,
                               label: this.label, calls: this.calls > 0 }),
      tokenUsage: { total: 5, prompt: 2, completion: 3 },
      cost: 0.25,
      metadata: { from: 'class' },
    };
  }
}

module.exports = EchoProvider;
