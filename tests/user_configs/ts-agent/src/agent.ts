interface ProviderOptions { id?: string; config?: { prefix?: string } }
interface ProviderResponse { output: string; tokenUsage?: { total: number } }

export default class SummaryAgent {
  private prefix: string;

  constructor(options: ProviderOptions) {
    this.prefix = options.config?.prefix ?? 'SUMMARY';
  }

  id(): string {
    return 'summary-agent';
  }

  async callApi(prompt: string): Promise<ProviderResponse> {
    const text: string = prompt.replace(/^Summarise: /, '');
    return { output: `${this.prefix}: ${text}`, tokenUsage: { total: text.split(' ').length } };
  }
}
