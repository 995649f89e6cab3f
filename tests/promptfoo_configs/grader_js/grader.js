class Grader {
  constructor(options) { this.options = options; }
  id() { return 'js-grader'; }
  async callApi(prompt) {
    const pass = prompt.includes('Paris');
    return { output: JSON.stringify({ pass, score: pass ? 1 : 0, reason: pass ? 'mentions Paris' : 'no Paris' }),
             tokenUsage: { total: 7, prompt: 5, completion: 2 } };
  }
}
module.exports = Grader;
