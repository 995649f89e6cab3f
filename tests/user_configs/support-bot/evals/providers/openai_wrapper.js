// Our own wrapper around the chat completions API, as the team uses it in production.
class OpenAIWrapper {
  constructor(options) {
    this.providerId = options.id;
    this.config = options.config || {};
  }

  id() {
    return this.providerId;
  }

  async callApi(prompt, context) {
    const response = await fetch(`${this.config.apiBaseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
      body: JSON.stringify({
        model: this.config.model,
        temperature: this.config.temperature,
        messages: [{ role: 'user', content: prompt }],
      }),
    });
    if (!response.ok) {
      return { error: `API error ${response.status}: ${await response.text()}` };
    }
    const data = await response.json();
    const usage = data.usage || {};
    return {
      output: data.choices[0].message.content,
      tokenUsage: { total: usage.total_tokens, prompt: usage.prompt_tokens, completion: usage.completion_tokens },
      cost: (usage.total_tokens || 0) * 0.000001,
      metadata: { model: data.model, question: context.vars.question },
    };
  }
}

module.exports = OpenAIWrapper;
