import pytest


@pytest.fixture
def dist(tmp_path):
    """A release folder of one wheel, what the hostile publish tests try to upload."""
    folder = tmp_path / "dist"
    folder.mkdir()
    (folder / "a.whl").write_bytes(b"PK wheel")
    return folder
