"""The HTML report in headless Chromium: it renders, and every figure loads."""

import subprocess
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install -y chromium)"),
]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture
def report_dir(store_path, tmp_path) -> Path:
    out = tmp_path / "html"
    result = CliRunner().invoke(app, ["report", "--db", f"sqlite:///{store_path}", "--html", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_every_image_loads(report_dir, tmp_path):
    figures = sorted(path.name for path in report_dir.glob("*.png"))
    assert len(figures) == 8 and "generations-h100-vs-rtx4090.png" in figures  # the cross-GPU figure too
    dom = chromium(tmp_path / "profile", "--dump-dom", (report_dir / "index.html").as_uri()).stdout
    assert f'data-image-count="{len(figures)}"' in dom
    assert 'data-images-ok="true"' in dom


def test_a_missing_figure_is_detected(report_dir, tmp_path):
    next(report_dir.glob("llm-*.png")).unlink()
    dom = chromium(tmp_path / "profile", "--dump-dom", (report_dir / "index.html").as_uri()).stdout
    assert 'data-images-ok="false"' in dom


def test_screenshot_is_not_blank(report_dir, tmp_path):
    screenshot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1400,3000",
             (report_dir / "index.html").as_uri())
    assert screenshot.stat().st_size > 10_000
    with Image.open(screenshot) as image:
        assert image.size == (1400, 3000)
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
        assert colours is None or len(colours) > 50  # None: more colours than counted


# Where each table's value cells end, against the viewport: set on the body once the page has loaded.
CELLS_IN_VIEW = """<script>
window.addEventListener('load', function () {
  var cells = Array.prototype.slice.call(document.querySelectorAll('td'));
  var outside = cells.filter(function (cell) { return cell.getBoundingClientRect().right > window.innerWidth; });
  document.body.dataset.cells = String(cells.length);
  document.body.dataset.cellsOutside = String(outside.length);
});
</script>"""


def test_every_value_cell_is_inside_a_1280_px_viewport(report_dir, tmp_path):
    """Captions of 200-300 characters that did not wrap pushed the tables' value columns off-screen."""
    page = report_dir / "index.html"
    measured = report_dir / "measured.html"
    measured.write_text(page.read_text().replace("</body>", CELLS_IN_VIEW + "</body>"))
    dom = chromium(tmp_path / "profile", "--window-size=1280,900", "--dump-dom", measured.as_uri()).stdout
    assert 'data-cells-outside="0"' in dom and 'data-cells="0"' not in dom, dom[-300:]
