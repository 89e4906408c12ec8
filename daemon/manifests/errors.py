"""The one error every manifest stage raises: ManifestError names file, document, object and field."""

from __future__ import annotations


class ManifestError(ValueError):
    """Bad input; the message names the file, the document, the object and the field.

    `document` is the document's 0-based index in its file; the message counts documents from 1,
    as people (and the line and column numbers beside them) do: "document 1" is the first."""

    def __init__(
        self, file: str, reason: str, *, document: int | None = None, obj: str = "", field: str = ""
    ) -> None:
        self.file = file
        self.document = document
        self.obj = obj
        self.field = field
        self.reason = reason
        where = file
        if document is not None:
            where += f": document {document + 1}"
            if obj:
                where += f" ({obj})"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {reason}")
