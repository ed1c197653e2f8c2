package load

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/schema"
)

// A YAML file is checked document by document as far as its syntax
// allows: a byte the YAML reader refuses (invalid UTF-8, a control
// character) blanks the document that holds it, and after a syntax error
// the decoder starts again at the next "---", so the file's other
// documents are still checked. Blanking keeps every newline, so lines and
// columns stay those of the file.

// maxRestarts bounds how often one file's decoding starts again after a
// syntax error.
const maxRestarts = 100

// docStarts returns the offsets of the lines that start a document ("---"
// alone or followed by a space, at column 1), after offset 0.
func docStarts(data []byte) []int {
	var out []int
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off
		}
		line := data[off:end]
		if off > 0 && bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r') {
			out = append(out, off)
		}
		off = end + 1
	}
	return out
}

// blank returns data with the bytes from..to replaced by spaces, newlines
// kept.
func blank(data []byte, from, to int) []byte {
	out := bytes.Clone(data)
	for i := from; i < to; i++ {
		if out[i] != '\n' {
			out[i] = ' '
		}
	}
	return out
}

// docRange returns the document around offset off: from its "---" line
// (or 0) to the next one (or the end).
func docRange(starts []int, off, size int) (int, int) {
	from, to := 0, size
	for _, s := range starts {
		if s <= off {
			from = s
		} else {
			to = s
			break
		}
	}
	return from, to
}

// lineCol returns the 1-based line and column (in characters) of offset
// off.
func lineCol(data []byte, off int) (int, int) {
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(data[start:off])
}

// badBytes reports each document holding invalid UTF-8 or a control
// character, at the first such byte, and returns data with those
// documents blanked.
func badBytes(name string, data []byte) ([]byte, []Diagnostic) {
	var diags []Diagnostic
	var starts []int
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		var msg string
		switch {
		case r == utf8.RuneError && size <= 1:
			msg = fmt.Sprintf("invalid UTF-8 (byte 0x%02X); YAML files must be UTF-8: save the file as UTF-8", data[off])
		case r == '\uFEFF' && off == 0, r == '\t', r == '\n', r == '\r':
		case r < 0x20 || r == 0x7F || (r >= 0x80 && r <= 0x9F) || r == '\uFFFE' || r == '\uFFFF':
			msg = fmt.Sprintf("a control character (U+%04X) is not allowed in YAML; remove it, or write it as an escape inside a double-quoted string", r)
		}
		if msg == "" {
			off += size
			continue
		}
		if starts == nil {
			starts = docStarts(data)
		}
		line, col := lineCol(data, off)
		diags = append(diags, errorf(schema.Pos{File: name, Line: line, Col: col}, "invalid YAML: %s", msg))
		from, to := docRange(starts, off, len(data))
		data = blank(data, from, to) // the next "---", at to, stays
		off = to
	}
	return data, diags
}

// yamlSyntax turns the YAML library's error into a diagnostic at the line
// and column of the mistake, in berth's words. The library names the line
// where the construct around the mistake starts, counted from 0 for
// parser errors and from 1 for scanner errors; neither has a column.
func yamlSyntax(name string, data []byte, err error) Diagnostic {
	d := yamlError(name, err)
	msg := strings.TrimPrefix(d.Message, "invalid YAML: ")
	line := d.Pos.Line
	if line > 0 && parserError(msg) {
		line++
	}
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return d
	}
	text := strings.TrimSuffix(lines[line-1], "\r")
	col := 1 + len(text) - len(strings.TrimLeft(text, " "))
	at := func(l, c int, format string, args ...any) Diagnostic {
		return errorf(schema.Pos{File: name, Line: l, Col: c}, "invalid YAML: "+format, args...)
	}
	switch {
	case strings.Contains(msg, "tab character") || msg == "found character that cannot start any token":
		for l := line; l <= len(lines) && l < line+2; l++ {
			t := lines[l-1]
			if i := strings.IndexByte(t, '\t'); i >= 0 && strings.TrimLeft(t[:i], " ") == "" {
				return at(l, i+1, "a tab indents this line; YAML indents with spaces only")
			}
		}
		if msg == "found character that cannot start any token" {
			return at(line, col, "%q cannot start a value here; put the value in quotes", firstRune(text[col-1:]))
		}
	case strings.HasPrefix(msg, "did not find expected ',' or "):
		if l, c, closer, open, ok := flowMistake(lines, line); ok {
			if closer != "" {
				return at(l, c, "%q does not close the %q opened at line %d column %d; write %q there, or close the %q first", closer, string(open.ch), open.line, open.col, closerOf(open.ch), string(open.ch))
			}
			return at(l, c, "the %q opened here is not closed; end it with %q, and separate its items with ','", string(open.ch), closerOf(open.ch))
		}
	case msg == "found unexpected end of stream" || strings.Contains(msg, "found unexpected end of stream"):
		if c, q, ok := unclosedQuote(text); ok {
			return at(line, c, "the string quoted with %c here is not closed; end it with %c", q, q)
		}
	case msg == "did not find expected key":
		return at(line, col, "this line is indented differently from the lines before it; indent it like its siblings (YAML counts spaces)")
	case strings.HasPrefix(msg, "mapping values are not allowed"):
		if i := strings.Index(text, ": "); i >= 0 {
			if j := strings.Index(text[i+2:], ": "); j >= 0 {
				return at(line, i+2+j+1, "a second ': ' on this line; put the value in quotes if it holds ': '")
			}
		}
		return at(line, col, "a ':' where a value was expected; put the value in quotes, or check the indentation")
	}
	return at(line, col, "%s", msg)
}

// parserError reports whether msg is one of the YAML parser's (not its
// scanner's) messages, whose line numbers count from 0.
func parserError(msg string) bool {
	for _, p := range []string{"did not find expected key", "did not find expected ',' or", "did not find expected node content", "did not find expected '-' indicator", "did not find expected <document start>", "did not find expected <stream-start>"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func firstRune(s string) string {
	r, _ := utf8.DecodeRuneInString(s)
	return string(r)
}

// flowMistake scans the flow collections from the start of line: the
// first closing bracket of the wrong kind is the mistake; failing that,
// the innermost bracket still open where a line is indented no deeper
// than line (flow content must be indented deeper), or at the end.
func flowMistake(lines []string, line int) (l, c int, closer string, open opener, ok bool) {
	type frame = opener
	var stack []frame
	var quote byte
	indent := func(t string) int { return len(t) - len(strings.TrimLeft(t, " ")) }
	base := indent(lines[line-1])
	for l := line; l <= len(lines); l++ {
		text := strings.TrimSuffix(lines[l-1], "\r")
		if l > line && len(stack) > 0 && strings.TrimSpace(text) != "" && (indent(text) <= base || strings.HasPrefix(text, "---")) {
			break
		}
		for i := 0; i < len(text); i++ {
			ch := text[i]
			switch {
			case quote != 0:
				if ch == quote {
					quote = 0
				}
			case ch == '"' || ch == '\'':
				quote = ch
			case ch == '#' && (i == 0 || text[i-1] == ' ' || text[i-1] == '\t'):
				i = len(text)
			case ch == '[' || ch == '{':
				stack = append(stack, frame{ch: ch, line: l, col: i + 1})
			case ch == ']' || ch == '}':
				if len(stack) == 0 {
					continue
				}
				top := stack[len(stack)-1]
				if (top.ch == '[') != (ch == ']') {
					return l, i + 1, string(ch), top, true
				}
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) == 0 && l > line {
			break
		}
	}
	if len(stack) == 0 {
		return 0, 0, "", opener{}, false
	}
	top := stack[len(stack)-1]
	return top.line, top.col, "", top, true
}

// opener is an open '[' or '{' and where it is.
type opener struct {
	ch        byte
	line, col int
}

func closerOf(ch byte) string {
	if ch == '[' {
		return "]"
	}
	return "}"
}

// unclosedQuote returns the column of a quote the line opens and does not
// close.
func unclosedQuote(text string) (int, byte, bool) {
	var quote byte
	at := 0
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case quote == '"' && ch == '\\':
			i++
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			quote, at = ch, i
		case ch == '#' && (i == 0 || text[i-1] == ' '):
			i = len(text)
		}
	}
	return at + 1, quote, quote != 0
}
