// Assertion functions used by promptfooconfig.yaml (factcli parity fixture).
function mentionsWord(output, context) {
  return output.includes(context.vars.word);
}

function lengthScore(output) {
  return output.length / 100;
}

function graded(output, context) {
  const ok = output.startsWith(context.config.prefix);
  return { pass: ok, score: ok ? 0.9 : 0.1, reason: ok ? 'starts right' : 'starts wrong' };
}

function explode() {
  throw new Error('file function exploded');
}

async function slowYes(output) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  return output.length > 0;
}

module.exports = { mentionsWord, lengthScore, graded, explode, slowYes };
