"""A strict reader of the Prometheus text exposition format, for tests of the .prom renderer."""

import re

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


def parse_prom(text):
    """A strict reader of the text exposition format: [(name, {label: value}, float)]; label escapes undone."""
    samples = []
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, "not a sample line: %r" % line
        labels, body, pos = {}, match.group(2) or "", 0
        while pos < len(body):
            key_end = body.index('="', pos)
            key, pos, value = body[pos:key_end], key_end + 2, []
            while body[pos] != '"':
                if body[pos] == "\\":
                    value.append({"\\": "\\", '"': '"', "n": "\n"}[body[pos + 1]])
                    pos += 2
                else:
                    value.append(body[pos])
                    pos += 1
            labels[key] = "".join(value)
            pos += 1
            if pos < len(body):
                assert body[pos] == ",", body
                pos += 1
        samples.append((match.group(1), labels, float(match.group(3))))
    return samples
