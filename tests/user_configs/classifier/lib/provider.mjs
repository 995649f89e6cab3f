const RULES = [[/charged|refund|invoice/i, 'billing'], [/crash|error|bug/i, 'bug']];

function label(text) {
  const hit = RULES.find(([pattern]) => pattern.test(text));
  return hit ? hit[1] : 'other';
}

export class KeywordClassifier {
  constructor(options) {
    this.options = options;
  }

  id() {
    return 'keyword-classifier';
  }

  async callApi(prompt) {
    return { output: label(prompt), tokenUsage: { total: 1, prompt: 1, completion: 0 } };
  }
}

export async function classify(prompt, context) {
  return { output: label(prompt), metadata: { vars: Object.keys(context.vars).filter((k) => !k.startsWith('__')) } };
}
