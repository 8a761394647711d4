"""An invoice as PDF, rendered from its printable HTML page by WeasyPrint (HTML and CSS to
PDF, no browser). WeasyPrint needs Pango from the system; a Chinese page needs a CJK font
(fonts-noto-cjk or fonts-wqy-microhei), else its characters print as boxes."""

import shutil
import subprocess
from functools import cache

from gpupool.model import SpecError


class PdfUnavailable(SpecError):
    """PDF export cannot run here (WeasyPrint or its system libraries are missing)."""


def invoice_pdf(html: str, lang: str = "en") -> bytes:
    """The PDF of an invoice page (A4, the page's own print styles). A Chinese page is
    refused where no Chinese font is installed: it would print as boxes."""
    if lang == "zh" and has_cjk_font() is False:
        raise PdfUnavailable(
            "pdf: no Chinese font is installed on the server, the page would print as boxes "
            "(Debian: apt install fonts-noto-cjk, or fonts-wqy-microhei); or ask for lang=en",
            field="lang",
        )
    try:
        from weasyprint import HTML
    except (ImportError, OSError) as exc:  # OSError: Pango's shared library is missing
        raise PdfUnavailable(
            f"pdf: WeasyPrint cannot start here ({exc}); install gpupool's dependencies and "
            "the system's Pango (Debian: apt install libpango-1.0-0 libpangoft2-1.0-0)",
            field="format",
        ) from None
    return HTML(string=html).write_pdf()


@cache
def has_cjk_font() -> bool | None:
    """Whether fontconfig knows a font for Chinese (None: fc-list is not installed)."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    try:
        out = subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(out.stdout.strip())
