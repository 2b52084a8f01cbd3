// Measures the playground's redraw in a real headless Chromium over the
// DevTools protocol: the time from the rate slider's input event to the new
// results in the DOM plus two animation frames, ten moves (docs/playground.md,
// "Speed"). Node 20+ (`--experimental-websocket`), nothing to install:
//
//   target/release/servesim playground --port 18745 --no-open &
//   chromium --headless --no-sandbox --disable-gpu --remote-debugging-port=9333 \
//     --user-data-dir=/tmp/cdp-profile --window-size=1400,2000 about:blank &
//   node --experimental-websocket .ci/playground-redraw.mjs http://127.0.0.1:18745/ 9333
const [url, port] = process.argv.slice(2);
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = targets.find(t => t.type === 'page');
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise(r => ws.addEventListener('open', r));
let id = 0; const waiting = new Map();
ws.addEventListener('message', m => { const d = JSON.parse(m.data); if (d.id && waiting.has(d.id)) { waiting.get(d.id)(d); waiting.delete(d.id); } });
const send = (method, params = {}) => new Promise(r => { const i = ++id; waiting.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });
await send('Page.enable');
await send('Page.navigate', { url });
await new Promise(r => setTimeout(r, 4000));
const once = `(async (v) => {
  const s = document.querySelector('[data-drive="rate"]');
  const results = document.querySelector('#results') || document.body;
  const before = document.querySelector('#status').textContent;
  const t0 = performance.now();
  s.value = v; s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true}));
  for (;;) { await new Promise(r => setTimeout(r, 1)); if (document.querySelector('#status').textContent !== before && !document.body.classList.contains('busy')) break; if (performance.now() - t0 > 10000) return -1; }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0 + ' | ' + document.querySelector('#status').textContent;
})`;
const out = [];
for (const v of [12, 14, 16, 18, 12, 14, 16, 18, 12, 14]) {
  const r = await send('Runtime.evaluate', { expression: `${once}(${v})`, awaitPromise: true, returnByValue: true });
  out.push(r.result.result.value);
}
console.log(out.join('\n'));
ws.close();
