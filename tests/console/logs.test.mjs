// The Logs tab's logic (crates/occ-api/console/assets/logs.js): the default revision (the rule
// `occ agent logs` uses), the query of each request, how records read as rows, appending follow
// pages without duplicates within a bound, the text filter and waiting out a 429.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  LEVEL_CHIPS, MAX_RECORDS, appendPage, defaultRevision, downloadName, gapLabel, lineParts, logsQuery, matchesFilter, recordText, retryDelay,
} from '../../crates/occ-api/console/assets/logs.js';

const revisions = [{ id: 'rev_1', revision: 1 }, { id: 'rev_3', revision: 3 }, { id: 'rev_2', revision: 2 }];
const line = (message, fields = {}) => ({
  type: 'line', time: '2026-12-02T03:00:00.000Z', stream: { source: 'gateway' }, contentClass: 'operational',
  kind: 'openclaw', level: 'info', message, ...fields,
});
const gap = (reason) => ({ type: 'gap', time: null, stream: { source: 'gateway' }, reason, remedy: 'Lines are missing here.' });

test('the default revision: a newer one with workloads, else the active one, else the latest', () => {
  assert.equal(defaultRevision('rev_2', revisions, true), 'rev_3', 'a deployment in progress or failing shows first');
  assert.equal(defaultRevision('rev_2', revisions, false), 'rev_2', 'a newer revision without workloads does not');
  assert.equal(defaultRevision('rev_3', revisions, false), 'rev_3', 'the active one is the latest');
  assert.equal(defaultRevision(null, revisions, false), 'rev_3', 'nothing active: the latest');
  assert.equal(defaultRevision(null, [], false), null);
});

test('a new view asks for its tail; a follow poll only resumes the cursor', () => {
  assert.equal(logsQuery({ source: 'gateway', tailLines: 200 }), 'source=gateway&tailLines=200');
  assert.equal(logsQuery({ source: 'gateway', tailLines: 100, sinceSeconds: 300, minLevel: 'warn' }),
    'source=gateway&tailLines=100&sinceSeconds=300&minLevel=warn');
  assert.equal(logsQuery({ source: 'gateway', tailLines: 100, sinceSeconds: 300, minLevel: 'info', cursor: 'v1.a.b' }),
    'source=gateway&cursor=v1.a.b&minLevel=info');
  // a download is a new view: no cursor, whatever is passed
  assert.equal(logsQuery({ source: 'agent', minLevel: 'error', cursor: 'v1.a.b', download: true }),
    'source=agent&minLevel=error&download=true');
});

test('the level chips map to minLevel, All to none', () => {
  assert.deepEqual(LEVEL_CHIPS.map((c) => [c.id, c.minLevel]),
    [['all', null], ['debug', 'debug'], ['info', 'info'], ['warn', 'warn'], ['error', 'error']]);
  assert.equal(logsQuery({ source: 'gateway', minLevel: LEVEL_CHIPS[0].minLevel }), 'source=gateway');
});

test('records read as rows: lines, gaps and withheld counts', () => {
  assert.equal(recordText(line('listening on 127.0.0.1:18789', { subsystem: 'gateway' })),
    '2026-12-02T03:00:00.000Z info [gateway] listening on 127.0.0.1:18789');
  assert.equal(recordText(line('plain text', { time: null, level: 'unknown', kind: 'text' })), 'plain text', 'what a line does not say is left out');
  assert.deepEqual(lineParts(line('m', { level: 'warn', subsystem: 'ws' })),
    { time: '2026-12-02T03:00:00.000Z', level: 'warn', subsystem: '[ws]', message: 'm' });
  assert.equal(recordText(line('long', { truncated: true })), '2026-12-02T03:00:00.000Z info long …(cut)');
  assert.equal(gapLabel(gap('window_exceeded')), 'lines lost: window_exceeded');
  assert.equal(gapLabel(gap('stream_replaced')), 'log started over: stream_replaced');
  assert.equal(gapLabel(gap('something_new')), 'gap: something_new');
  assert.equal(recordText(gap('window_exceeded')), '— lines lost: window_exceeded — Lines are missing here.');
  assert.equal(recordText({ type: 'withheld', count: 3, reason: 'oversized' }), '— 3 lines withheld: oversized —');
  assert.equal(recordText({ type: 'withheld', count: 1, reason: 'malformed' }), '— 1 line withheld: malformed —');
});

test('pages are appended as they come, each record once, and the oldest dropped beyond the bound', () => {
  let state = appendPage([], { records: [line('a'), line('b')] });
  state = appendPage(state.records, { records: [] });
  state = appendPage(state.records, { records: [line('c'), gap('buffer_lost'), line('d')] });
  assert.deepEqual(state.records.map((r) => r.message || r.reason), ['a', 'b', 'c', 'buffer_lost', 'd']);
  assert.equal(state.dropped, 0);
  // a repeated text is a new line of output, not a duplicate: it is kept
  state = appendPage(state.records, { records: [line('d')] });
  assert.equal(state.records.length, 6);
  const bounded = appendPage([line('1'), line('2'), line('3')], { records: [line('4'), line('5')] }, 4);
  assert.deepEqual(bounded.records.map((r) => r.message), ['2', '3', '4', '5']);
  assert.equal(bounded.dropped, 1);
  const many = appendPage([], { records: Array.from({ length: MAX_RECORDS + 10 }, (_, i) => line(String(i))) });
  assert.equal(many.records.length, MAX_RECORDS);
  assert.equal(many.records[0].message, '10');
});

test('the text filter matches the row text case-insensitively and keeps gaps in view', () => {
  const record = line('Gateway listening', { subsystem: 'net' });
  assert.equal(matchesFilter(record, ''), true);
  assert.equal(matchesFilter(record, '  LISTENING '), true);
  assert.equal(matchesFilter(record, '[net]'), true);
  assert.equal(matchesFilter(record, 'refused'), false);
  assert.equal(matchesFilter(gap('window_exceeded'), 'refused'), true);
});

test('a 429 waits for Retry-After; anything else for the follow interval', () => {
  assert.equal(retryDelay({ status: 429, retryAfter: 3 }), 3000);
  assert.equal(retryDelay({ status: 429, retryAfter: null }), 2000);
  assert.equal(retryDelay({ status: 503, retryAfter: 9 }), 2000);
  assert.equal(retryDelay({ status: 503 }, 500), 500);
});

test('a download keeps the attachment name occ gives it', () => {
  assert.equal(downloadName('attachment; filename="agt_1-rev_2-gateway.log"', 'x.log'), 'agt_1-rev_2-gateway.log');
  assert.equal(downloadName(null, 'fallback.log'), 'fallback.log');
  assert.equal(downloadName('attachment; filename="../etc/passwd"', 'fallback.log'), 'fallback.log');
});
