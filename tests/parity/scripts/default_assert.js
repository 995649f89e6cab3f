module.exports = (output, { vars }) => ({
  pass: output.toLowerCase().includes(vars.word.toLowerCase()),
  score: 0.75,
  reason: `looked for ${vars.word}`,
});
