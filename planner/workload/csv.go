package workload

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ErrMissingColumn is wrapped when a required header column is absent.
var ErrMissingColumn = errors.New("missing column")

// ParseError locates a bad value: file, 1-based line, and column name.
type ParseError struct {
	File   string
	Line   int
	Column string // header name; empty for whole-line problems
	Err    error
}

func (e *ParseError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: column %q: %v", e.File, e.Line, e.Column, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// table is a CSV file with a header, read whole.
type table struct {
	file string
	cols map[string]int
	rows [][]string
	line []int // 1-based line of each row
}

func readTable(path string, required ...string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTable(path, f, required...)
}

// utf8BOM is the byte-order mark spreadsheet programs put at the start of
// a UTF-8 CSV; it is not part of the first column's name.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// skipBOM drops a leading UTF-8 byte-order mark.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM))
	}
	return br
}

func parseTable(name string, r io.Reader, required ...string) (*table, error) {
	cr := csv.NewReader(skipBOM(r))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Line: 1, Err: errors.New("empty file: want a header line")}
	}
	if err != nil {
		return nil, csvErr(name, err)
	}
	t := &table{file: name, cols: map[string]int{}}
	for i, h := range header {
		t.cols[strings.TrimSpace(h)] = i
	}
	for _, c := range required {
		if _, ok := t.cols[c]; !ok {
			return nil, &ParseError{File: name, Line: 1, Column: c, Err: fmt.Errorf("%w (header has %+q)", ErrMissingColumn, strings.Join(header, ","))}
		}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("has %d fields, header has %d", len(rec), len(header))}
		}
		t.rows = append(t.rows, rec)
		t.line = append(t.line, line)
	}
	return t, nil
}

func csvErr(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: name, Line: pe.Line, Err: pe.Err}
	}
	return fmt.Errorf("%s: %w", name, err)
}

func (t *table) str(row int, col string) string {
	return strings.TrimSpace(t.rows[row][t.cols[col]])
}

func (t *table) fail(row int, col string, err error) error {
	return &ParseError{File: t.file, Line: t.line[row], Column: col, Err: err}
}

func (t *table) float(row int, col string) (float64, error) {
	s := t.str(row, col)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, t.fail(row, col, fmt.Errorf("%q is not a number", s))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, t.fail(row, col, fmt.Errorf("%q is not a finite number", s))
	}
	return v, nil
}

func (t *table) nonNeg(row int, col string) (float64, error) {
	v, err := t.float(row, col)
	if err == nil && v < 0 {
		err = t.fail(row, col, fmt.Errorf("%v is negative", v))
	}
	return v, err
}

// posInt parses a positive integer of at most limit (integral floats like
// "4.0" are accepted).
func (t *table) posInt(row int, col string, limit int) (int, error) {
	s := t.str(row, col)
	v, err := strconv.Atoi(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return 0, t.fail(row, col, fmt.Errorf("%q is not an integer", s))
		}
		if f > float64(limit) {
			return 0, t.fail(row, col, fmt.Errorf("%s is more than %d", s, limit))
		}
		v = int(f)
	}
	if v <= 0 {
		return 0, t.fail(row, col, fmt.Errorf("%d is not positive", v))
	}
	if v > limit {
		return 0, t.fail(row, col, fmt.Errorf("%d is more than %d", v, limit))
	}
	return v, nil
}
