// The Logs tab's logic (occ's `GET …/deployments/{rev}/runtime/logs`): which revision to show
// by default, the query of a page, how each record reads as one row, how pages are appended
// without duplicates and within a bound, and the client-side text filter. Pure: no DOM, no fetch
// (unit-tested with node:test in tests/console).

/** Level chips: the least severe level each one shows (`null`: every line). */
export const LEVEL_CHIPS = [
  { id: 'all', label: 'All', minLevel: null },
  { id: 'debug', label: 'Debug', minLevel: 'debug' },
  { id: 'info', label: 'Info', minLevel: 'info' },
  { id: 'warn', label: 'Warn', minLevel: 'warn' },
  { id: 'error', label: 'Error', minLevel: 'error' },
];

/** Lines of a new view the tab offers (the route accepts 1–1000). */
export const TAIL_SIZES = [100, 200, 500, 1000];

/** How far back a new view reaches, in seconds (`null`: as far as the workload's log goes). */
export const SINCE_CHOICES = [
  { label: 'Any time', seconds: null },
  { label: 'Last 5 minutes', seconds: 300 },
  { label: 'Last hour', seconds: 3600 },
  { label: 'Last 24 hours', seconds: 86_400 },
];

/** Records the tab keeps (and renders) at most; older ones are dropped first. */
export const MAX_RECORDS = 5000;

/** Milliseconds between two follow polls. */
export const FOLLOW_INTERVAL_MS = 2000;

/**
 * The revision the tab shows first, by the rule `occ agent logs` uses: a revision newer than
 * the active one while it has workloads (a deployment in progress or failing), else the active
 * revision, else the latest; null when the Agent has none.
 * @param activeRevisionId the Agent's active revision, or null
 * @param revisions the Agent's revisions (`{id, revision}`)
 * @param latestHasWorkloads whether the latest revision has workloads (`…/runtime` lists Pods)
 */
export function defaultRevision(activeRevisionId, revisions, latestHasWorkloads) {
  let latest = null;
  for (const r of revisions || []) if (!latest || r.revision > latest.revision) latest = r;
  if (activeRevisionId && latest && latest.id !== activeRevisionId) {
    return latestHasWorkloads ? latest.id : activeRevisionId;
  }
  return activeRevisionId || (latest ? latest.id : null);
}

/**
 * The query string of one request. A cursor resumes a view (the route keeps the view's source;
 * `tailLines` and `sinceSeconds` only shape a new view's first page); a download is always a new
 * view and takes no cursor.
 */
export function logsQuery({ source, tailLines, sinceSeconds, minLevel, cursor, download }) {
  const query = new URLSearchParams({ source });
  if (cursor && !download) query.set('cursor', cursor);
  else {
    if (tailLines) query.set('tailLines', String(tailLines));
    if (sinceSeconds) query.set('sinceSeconds', String(sinceSeconds));
  }
  if (minLevel) query.set('minLevel', minLevel);
  if (download) query.set('download', 'true');
  return query.toString();
}

/** What a gap record means, in a few words (its reason as the API names it follows). */
const GAP_WORDS = {
  window_exceeded: 'lines lost',
  buffer_lost: 'lines may be lost',
  stream_replaced: 'log started over',
  cursor_expired: 'view started over',
  truncated: 'lines cut',
};

/** A gap's label, e.g. "lines lost: window_exceeded". */
export function gapLabel(record) {
  return `${GAP_WORDS[record.reason] || 'gap'}: ${record.reason}`;
}

/**
 * The parts of a line's row, each empty when the line does not say it: time, level (`unknown`
 * is left out), subsystem and message (marked when occ cut it).
 */
export function lineParts(record) {
  return {
    time: record.time || '',
    level: record.level && record.level !== 'unknown' ? record.level : '',
    subsystem: record.subsystem ? `[${record.subsystem}]` : '',
    message: `${record.message}${record.truncated ? ' …(cut)' : ''}`,
  };
}

/** One record as the text of its row. */
export function recordText(record) {
  if (record.type === 'gap') return `— ${gapLabel(record)} — ${record.remedy || ''}`.trimEnd();
  if (record.type === 'withheld') {
    return `— ${record.count} ${record.count === 1 ? 'line' : 'lines'} withheld: ${record.reason} —`;
  }
  const { time, level, subsystem, message } = lineParts(record);
  return [time, level, subsystem, message].filter(Boolean).join(' ');
}

/**
 * The records kept after a page arrives: the page's records appended in order (each page holds
 * only what followed the previous cursor, so nothing is compared or dropped as a duplicate),
 * then the oldest dropped beyond `limit`.
 * @returns `{records, dropped}`: the kept records and how many old ones were dropped
 */
export function appendPage(records, page, limit = MAX_RECORDS) {
  const all = records.concat((page && page.records) || []);
  const dropped = Math.max(0, all.length - limit);
  return { records: dropped ? all.slice(dropped) : all, dropped };
}

/** Whether a record's row matches the text filter (case-insensitive; gaps always show). */
export function matchesFilter(record, filter) {
  const wanted = (filter || '').trim().toLowerCase();
  if (!wanted || record.type !== 'line') return true;
  return recordText(record).toLowerCase().includes(wanted);
}

/** Milliseconds to wait before the next request after `error` (429: its `Retry-After`). */
export function retryDelay(error, fallbackMs = FOLLOW_INTERVAL_MS) {
  if (error && error.status === 429 && Number.isFinite(error.retryAfter) && error.retryAfter > 0) {
    return error.retryAfter * 1000;
  }
  return fallbackMs;
}

/** The file name of a download: the attachment's own, else `fallback`. */
export function downloadName(contentDisposition, fallback) {
  const match = /filename="([^"\\/]+)"/.exec(contentDisposition || '');
  return match ? match[1] : fallback;
}
