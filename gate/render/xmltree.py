"""The few parts of xml.etree.ElementTree the JUnit report uses (Element, SubElement, indent, tostring), writing the
same text: that module's import costs a large run 7-12 ms, this one's nothing. Pure.
tests/unit/test_xmltree.py holds the two to the same output on random trees."""

from __future__ import annotations

from collections.abc import Iterator


class Element:
    """An element: its tag, attributes (in the order set), text, children and tail, as ElementTree's."""

    __slots__ = ("tag", "attrib", "text", "tail", "_children")

    def __init__(self, tag: str, attrib: dict[str, str] | None = None, **extra: str) -> None:
        self.tag = tag
        self.attrib = {**(attrib or {}), **extra}
        self.text: str | None = None
        self.tail: str | None = None
        self._children: list[Element] = []

    def set(self, key: str, value: str) -> None:
        self.attrib[key] = value

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self._children:
            yield from child.iter()

    def __iter__(self) -> Iterator[Element]:
        return iter(self._children)

    def __len__(self) -> int:
        return len(self._children)


def SubElement(parent: Element, tag: str, attrib: dict[str, str] | None = None, **extra: str) -> Element:  # noqa: N802 (ElementTree's name)
    child = Element(tag, attrib, **extra)
    parent._children.append(child)
    return child


def indent(tree: Element, space: str = "  ") -> None:
    """ElementTree.indent(tree, space): whitespace-only texts and tails replaced by a newline and the depth's indent."""
    if not len(tree):
        return
    indentations = ["\n"]

    def children(elem: Element, level: int) -> None:
        child_indentation = "\n" + (level + 1) * space
        if len(indentations) <= level + 1:
            indentations.append(child_indentation)
        if not elem.text or not elem.text.strip():
            elem.text = child_indentation
        child = elem
        for child in elem:
            if len(child):
                children(child, level + 1)
            if not child.tail or not child.tail.strip():
                child.tail = child_indentation
        if not (child.tail or "").strip():
            child.tail = indentations[level]

    children(tree, 0)


def _cdata(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute(text: str) -> str:
    return (_cdata(text).replace('"', "&quot;").replace("\r", "&#13;").replace("\n", "&#10;").replace("\t", "&#09;"))


def tostring(elem: Element) -> str:
    """ElementTree.tostring(elem, encoding="unicode"): an element with neither text nor children as <tag ... />."""
    out: list[str] = []
    _write(out, elem)
    return "".join(out)


def _write(out: list[str], elem: Element) -> None:
    attrs = "".join(f' {k}="{_attribute(v)}"' for k, v in elem.attrib.items())
    if elem.text or len(elem):
        out.append(f"<{elem.tag}{attrs}>")
        if elem.text:
            out.append(_cdata(elem.text))
        for child in elem:
            _write(out, child)
        out.append(f"</{elem.tag}>")
    else:
        out.append(f"<{elem.tag}{attrs} />")
    if elem.tail:
        out.append(_cdata(elem.tail))
