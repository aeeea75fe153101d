"""Reading a knowledge upload's multipart form: only after the caller is known, never past the limit.

The API route and the console's upload form take no ``File()`` parameter (FastAPI would read and
spool the whole body before their authentication dependency runs). They list
``Depends(body_allowance(upload_body_bytes))`` after authentication, then call :func:`read_files`.
"""

from __future__ import annotations

from fastapi import Request
from starlette.datastructures import UploadFile

from switchboard.body_limit import BodyTooLarge
from switchboard.knowledge.parsers import DocumentRejected
from switchboard.settings import Settings

__all__ = ["FORM_OVERHEAD_BYTES", "MAX_FORM_FILES", "read_files", "upload_body_bytes"]

FORM_OVERHEAD_BYTES = 64 * 1024
"""Room for the multipart framing around the file(s): boundaries, part headers, the CSRF field."""
MAX_FORM_FILES = 20
"""Files one console upload form may carry."""


def upload_body_bytes(settings: Settings) -> int:
    """Body limit of an upload request (bytes): ``KB_MAX_UPLOAD_BYTES`` plus the form's framing.

    One form carries at most that many bytes of files in all, so a single file of the full size
    fits and several smaller ones share it."""
    return settings.kb_max_upload_bytes + FORM_OVERHEAD_BYTES


async def read_files(request: Request, field: str, *, max_files: int) -> list[UploadFile]:
    """The uploaded files of form field ``field`` (empty when there are none).

    Raises:
        DocumentRejected: ``too_large`` when the body passes :func:`upload_body_bytes` (counted
            while it arrives: nothing past the limit is read or stored).
        HTTPException: 400 for a malformed form or more than ``max_files`` files (Starlette's words).
    """
    try:
        form = await request.form(max_files=max_files, max_fields=10)
    except BodyTooLarge as exc:
        limit = request.app.state.settings.kb_max_upload_bytes
        raise DocumentRejected("upload", "too_large", f"over the upload limit of {limit} bytes") from exc
    return [value for value in form.getlist(field) if isinstance(value, UploadFile)]
