// A turn's sources as the chat shows them: which the answer cited, and the others.

/** Which sources the answer cited: the final record's list when there is one. */
function citedSet(turn, sources) {
  const cited = turn.context_metadata?.citations?.cited;
  if (Array.isArray(cited)) return new Set(cited.map(Number));
  return new Set(sources.filter((s) => s.cited).map((s) => s.n));
}

/** The sources of a turn as shown: live ones (with snippets), else the stored manifest. */
export function turnSources(turn) {
  if (turn.sources && turn.sources.length) return turn.sources;
  return ((turn.context_metadata && turn.context_metadata.sources) || []).map((s, i) => ({ n: s.n ?? i + 1, ...s }));
}

/** Cited sources, and the others the search returned. */
export function splitSources(turn) {
  const sources = turnSources(turn);
  const cited = citedSet(turn, sources);
  return { cited: sources.filter((s) => cited.has(s.n)), others: sources.filter((s) => !cited.has(s.n)), all: sources };
}
