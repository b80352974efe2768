// Lighthouse on many pages with one Chromium (driven by scripts/lighthouse.py).
//
// Reads one JSON job a line on stdin:
//   {"url": "...", "form": "mobile"|"desktop", "out": "/path/report.json",
//    "cookies": {"lang": "en", "session": "..."}}
// and answers one JSON line on stdout per job: {"out": ..., "ok": true} or
// {"ok": false, "error": "..."}.
//
// Cookies go into the browser's cookie jar (as a signed-in customer's browser holds
// them), not into Lighthouse's --extra-headers: once the site has set a cookie (the CSRF
// cookie, app.js's tz), Chromium sends the jar's Cookie header instead of the extra one,
// so the invoice's htmx status poll (every 3 s) went out signed out, was answered with
// HX-Redirect to /login, and the page navigated away in the middle of the audit
// (best practices, sometimes accessibility, then had no score).
// Every job starts from an empty jar; Lighthouse clears the cache itself.
import readline from 'node:readline';
import fs from 'node:fs';

import * as chromeLauncher from 'chrome-launcher';
import puppeteer from 'puppeteer-core';
import lighthouse from 'lighthouse';
import desktopConfig from 'lighthouse/core/config/desktop-config.js';

const CATEGORIES = ['performance', 'accessibility', 'best-practices'];

const chrome = await chromeLauncher.launch({
  chromePath: process.env.CHROME_PATH || '/usr/bin/chromium',
  chromeFlags: ['--headless=new', '--no-sandbox', '--disable-gpu'],
});
const browser = await puppeteer.connect({
  browserURL: `http://127.0.0.1:${chrome.port}`,
  defaultViewport: null,
});

async function runJob(job) {
  const page = await browser.newPage();
  try {
    const cdp = await page.createCDPSession();
    await cdp.send('Network.clearBrowserCookies');
    for (const [name, value] of Object.entries(job.cookies || {})) {
      await cdp.send('Network.setCookie', {name, value, url: job.url, path: '/'});
    }
    await cdp.detach();
    const flags = {output: 'json', logLevel: 'error', onlyCategories: CATEGORIES};
    const config = job.form === 'desktop' ? desktopConfig : undefined;
    const result = await lighthouse(job.url, flags, config, page);
    if (!result) throw new Error('Lighthouse returned no result');
    fs.writeFileSync(job.out, result.report);
    return {out: job.out, ok: true};
  } finally {
    await page.close().catch(() => {});
  }
}

const rl = readline.createInterface({input: process.stdin});
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await runJob(JSON.parse(line));
  } catch (err) {
    answer = {ok: false, error: String(err && err.stack ? err.stack : err).slice(0, 2000)};
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
await browser.disconnect();
chrome.kill();
