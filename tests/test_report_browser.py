"""The HTML report in a real headless browser (Debian's chromium): it loads without console
errors and every figure of the config is shown.

The Snakemake report is a single-page app: the figures appear only after clicking (Results →)
Figures → a figure's eye icon.  The test loads a copy of the report with two small scripts added
(one at the top of <head> that records uncaught errors, rejected promises and console.error from
the first line on; one at the end of <body> that clicks through every figure and records the
decoded PNG it shows), dumps the DOM after a virtual-time budget, and reads the record back.
A screenshot of the last figure shown must not be blank.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from conftest import SMALL_FIGURES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

HOOKS = """<script>
window.__probe = {errors: [], shown: {}, rows: []};
window.addEventListener('error', function (e) { __probe.errors.push('uncaught: ' + e.message); });
window.addEventListener('unhandledrejection', function (e) {
  __probe.errors.push('unhandled rejection: ' + e.reason);
});
(function () {
  var orig = console.error;
  console.error = function () {
    __probe.errors.push('console.error: ' + Array.from(arguments).join(' '));
    orig.apply(console, arguments);
  };
})();
</script>"""

DRIVER = """<script>
(function () {
  function link(text) {
    return Array.from(document.querySelectorAll('#app a')).find(function (a) {
      return a.innerText.trim() === text;
    });
  }
  function rows() { return Array.from(document.querySelectorAll('#app nav table tbody tr')); }
  function finish() {
    var out = document.createElement('pre');
    out.id = 'probe-result';
    out.textContent = JSON.stringify(__probe);
    document.body.appendChild(out);
  }
  function show(i) {
    var all = rows();
    if (i >= all.length) { finish(); return; }
    var name = all[i].querySelector('td').innerText.trim();
    __probe.rows.push(name);
    all[i].querySelector('a[iconname=eye]').click();
    setTimeout(function () {
      var images = Array.from(document.querySelectorAll('#app img'));
      __probe.shown[name] = images.filter(function (im) {
        return im.src.indexOf('data:image/png') === 0
          && im.naturalWidth > 100 && im.naturalHeight > 100;
      }).map(function (im) { return [im.naturalWidth, im.naturalHeight]; });
      show(i + 1);
    }, 500);
  }
  setTimeout(function () {
    var results = link('Results');  // only when the results have a single category
    if (results) results.click();
    setTimeout(function () {
      var figures = link('Figures');
      if (!figures) { __probe.errors.push('no Figures category'); finish(); return; }
      figures.click();
      setTimeout(function () { show(0); }, 300);
    }, 300);
  }, 1000);
})();
</script>"""


def chromium() -> str:
    """Debian's chromium; installed with apt-get when missing (root only), else the test skips."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(
            "chromium is missing and cannot be installed here (needs root and apt-get): "
            "apt-get install -y chromium"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "chromium"]
    if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True, timeout=600)
        subprocess.run(install, env=env, capture_output=True, check=True, timeout=900)
    return shutil.which("chromium") or pytest.fail(
        "apt-get installed chromium but it is not on PATH"
    )


def browse(browser: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """One headless chromium run on ``page`` with a fresh profile folder."""
    cmd = [
        browser,
        *FLAGS,
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def probe_copy(report: Path, dest: Path) -> Path:
    html = report.read_text()
    head = html.index("<head>") + len("<head>")
    html = html[:head] + HOOKS + html[head:]
    body = html.rindex("</body>")
    dest.write_text(html[:body] + DRIVER + html[body:])
    return dest


def test_report_shows_every_figure_without_console_errors(built, tmp_path):
    """``built``'s report (made after the whole DAG: it also shows provenance.json)."""
    browser = chromium()
    page = probe_copy(built / "results" / "report.html", tmp_path / "probe.html")

    loaded = browse(
        browser, page, tmp_path / "profile1", "--enable-logging=stderr", "--v=0", "--dump-dom"
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    console = [
        line
        for line in loaded.stderr.splitlines()
        if re.search(r"CONSOLE.*Uncaught|Failed to load resource|net::ERR_", line)
    ]
    assert console == [], console
    record = re.search(r'<pre id="probe-result">(.*?)</pre>', loaded.stdout, re.S)
    assert record, "the report's app never finished rendering (no probe result in the DOM)"
    probe = json.loads(unescape(record.group(1)))
    assert probe["errors"] == [], probe["errors"]
    drawn = [
        f for f in SMALL_FIGURES if f != "claims"
    ]  # the claims table has its own category, Claims
    assert sorted(probe["rows"]) == sorted(drawn)
    for figure in drawn:
        assert len(probe["shown"][figure]) == 1, (
            f"{figure}: no decoded PNG shown ({probe['shown'][figure]})"
        )

    shot = tmp_path / "report.png"
    browse(browser, page, tmp_path / "profile2", "--window-size=1400,900", f"--screenshot={shot}")
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, 1400)
    assert (pixels.min(axis=2) < 0.5).mean() > 0.02, "the screenshot is blank"
