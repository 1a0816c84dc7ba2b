// Opens one page in Debian's headless Chromium (driven by playwright-core) and reports, as one
// JSON document on stdout, what a person's browser would meet: the HTTP status and headers,
// console messages (CSP violations are reported there), failed and attempted requests, the
// text of every element carrying a data-key attribute (the numbers the tests compare with the
// JSON result), and a full-page screenshot.
//   node tests/browser/check_page.mjs URL SCREENSHOT.png
import { chromium } from 'playwright-core';

const [url, screenshot] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error('usage: check_page.mjs URL SCREENSHOT.png');
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.GPUOPS_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const messages = [];
  const failed = [];
  const requests = [];
  page.on('console', (m) => messages.push({ type: m.type(), text: m.text() }));
  page.on('pageerror', (e) => messages.push({ type: 'pageerror', text: String(e) }));
  page.on('request', (r) => requests.push(r.url()));
  page.on('requestfailed', (r) => failed.push({ url: r.url(), error: r.failure()?.errorText ?? '' }));
  const response = await page.goto(url, { waitUntil: 'load' });
  const data = {};
  for (const el of await page.locator('[data-key]').all()) {
    const key = await el.getAttribute('data-key');
    (data[key] ??= []).push((await el.textContent()).trim());
  }
  const scripts = await page.locator('script').count();
  await page.screenshot({ path: screenshot, fullPage: true });
  process.stdout.write(JSON.stringify({
    status: response.status(),
    headers: response.headers(),
    title: await page.title(),
    console: messages,
    failed,
    requests,
    data,
    scripts,
  }) + '\n');
} finally {
  await browser.close();
}
