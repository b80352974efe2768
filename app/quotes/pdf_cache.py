"""Rendered quote PDFs: cached per quote version with a concurrency cap — the machinery
lives in ``app.pdfdoc`` (one cache and one cap for every PDF the app makes)."""

from __future__ import annotations

from app.pdfdoc import CACHE, MAX_RENDERS, PdfCache, RendererBusy, version_of

__all__ = ["CACHE", "MAX_RENDERS", "PdfCache", "RendererBusy", "version_of"]
