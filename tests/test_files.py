"""Reading a user's file as text: its bytes as stored, or one line naming the file and the problem."""

import pytest

from kvproof.model.files import read_user_text


class Bad(Exception):
    pass


def test_the_text_is_returned_as_stored(tmp_path):
    f = tmp_path / "a.toml"
    f.write_bytes(b"x = 1\r\ny = 2\n")
    assert read_user_text(f, Bad, "a scenario") == "x = 1\r\ny = 2\n"  # no newline translation


def test_not_utf8_names_the_byte_and_what_was_expected(tmp_path):
    f = tmp_path / "b.json"
    f.write_bytes(b"ok\xff")
    with pytest.raises(Bad, match=r"b.json: not UTF-8 text \(byte 2\): expected an ITF trace$"):
        read_user_text(f, Bad, "an ITF trace")


@pytest.mark.parametrize("name", ["missing.toml", "nul\x00.toml"])
def test_a_file_that_cannot_be_read_is_one_line(tmp_path, name):
    with pytest.raises(Bad, match=r": cannot read: "):
        read_user_text(tmp_path / name, Bad, "a scenario")
