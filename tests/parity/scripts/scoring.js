// assertScoringFunction fixtures (factcli parity fixture)
function strict(namedScores, context) {
  const low = Object.entries(namedScores).filter(([, v]) => v < 0.5).map(([k]) => k).sort();
  const types = context.componentResults.map((r) => (r.assertion ? r.assertion.type : 'set')).join(',');
  const pass = low.length === 0;
  return {
    pass,
    score: pass ? 1 : 0.25,
    reason: `low: [${low.join(',')}] threshold=${context.threshold} types=${types} tokens=${context.tokensUsed.total}`,
  };
}

function explode() {
  throw new Error('scoring exploded');
}

function incomplete() {
  return { pass: true };
}

async function later(namedScores) {
  return { pass: true, score: (namedScores.a || 0) / 2, reason: 'async scoring', namedScores: { a: 0.123 } };
}

module.exports = { strict, explode, incomplete, later };
