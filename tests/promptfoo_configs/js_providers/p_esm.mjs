export default class P {
  constructor(options) { this.options = options; }
  id() { return 'esm-provider'; }
  async callApi(prompt) { return { output: 'ESM ' + prompt }; }
}
