"""gate.render.xmltree writes what xml.etree.ElementTree writes, for the parts the JUnit report uses: random trees
of elements with attributes, texts and tails that need escaping, indented or not."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from gate.render import xmltree

TEXTS = ["", " ", "\n  ", "plain", 'a "quote"', "a < b & c > d", "tab\there", "cr\rlf\n", "caf\u00e9 \u4e2d", "'single'", "]]>"]


def _pair(rng: random.Random, depth: int) -> tuple[ET.Element, xmltree.Element]:
    attrib = {f"a{i}": rng.choice(TEXTS) for i in range(rng.randint(0, 3))}
    tag = rng.choice(["testsuite", "testcase", "system-out", "failure"])
    theirs, mine = ET.Element(tag, attrib), xmltree.Element(tag, attrib)
    if rng.random() < 0.5:
        theirs.text = mine.text = rng.choice(TEXTS)
    for _ in range(rng.randint(0, 3) if depth < 4 else 0):
        t, m = _pair(rng, depth + 1)
        theirs.append(t)
        mine._children.append(m)
        if rng.random() < 0.3:
            t.tail = m.tail = rng.choice(TEXTS)
    return theirs, mine


@pytest.mark.parametrize("indented", [False, True])
def test_random_trees_are_written_as_elementtree_writes_them(indented: bool) -> None:
    rng = random.Random(4 + indented)
    for _ in range(800):
        theirs, mine = _pair(rng, 0)
        if indented:
            ET.indent(theirs)
            xmltree.indent(mine)
        assert xmltree.tostring(mine) == ET.tostring(theirs, encoding="unicode")


def test_sub_elements_keep_their_attributes_in_order_and_iter_walks_depth_first() -> None:
    root = xmltree.Element("testsuites", name="rag-gate")
    suite = xmltree.SubElement(root, "testsuite", name="s", tests="1")
    case = xmltree.SubElement(suite, "testcase", classname="c", name="n")
    case.text = "detail"
    root.set("tests", "1")
    assert [e.tag for e in root.iter()] == ["testsuites", "testsuite", "testcase"]
    assert xmltree.tostring(root) == ('<testsuites name="rag-gate" tests="1"><testsuite name="s" tests="1">'
                                      '<testcase classname="c" name="n">detail</testcase></testsuite></testsuites>')


def test_the_characters_xml_forbids_are_the_complement_of_its_char_production() -> None:
    import re

    from gate.render.junit import _NOT_XML_CHAR
    allowed = re.compile("[\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    points = [*range(0, 0x3000), *range(0xD700, 0x10000), 0x10000, 0x1F600, 0x10FFFF]
    for cp in points:
        ch = chr(cp)
        assert bool(_NOT_XML_CHAR.fullmatch(ch)) is not bool(allowed.fullmatch(ch)), hex(cp)
