"""Writes a generated section into a docs page: between its two marker
comments where the page has them, else appended (after a heading, if
given). The bench scripts that fill docs/ share this."""
import pathlib


def write_section(doc: pathlib.Path, begin: str, end: str, body: str, heading: str = ""):
    """\\p body must start with \\p begin and end with \\p end."""
    text = doc.read_text()
    if begin in text:
        text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + (heading + "\n\n" if heading else "") + body + "\n"
    doc.write_text(text)
