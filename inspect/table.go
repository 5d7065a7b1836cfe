package inspect

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table prints rows under headers as kubectl get does: columns padded to their widest cell, three
// spaces apart. The last column is the long free text; it is cut to what is left of width.
type table struct {
	headers []string
	rows    [][]string
	// width is the terminal's width; 0 when the output is no terminal, which gets room for a
	// reasonable line instead.
	width int
	// cut says whether the last column is shortened to fit (off for -o wide).
	cut bool
}

const (
	columnGap = 3
	// lastColumnUnbounded is the last column's room when the output is no terminal.
	lastColumnUnbounded = 60
	lastColumnMin       = 20
)

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	widths := make([]int, len(t.headers))
	for _, row := range append([][]string{t.headers}, t.rows...) {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	room := t.lastRoom(widths)
	var b strings.Builder
	for _, row := range append([][]string{t.headers}, t.rows...) {
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(shorten(c, room))
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+columnGap))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lastRoom is how many characters the last column may take; 0 is no limit.
func (t *table) lastRoom(widths []int) int {
	if !t.cut {
		return 0
	}
	if t.width == 0 {
		return lastColumnUnbounded
	}
	used := 0
	for _, w := range widths[:len(widths)-1] {
		used += w + columnGap
	}
	return max(t.width-used, lastColumnMin)
}

// shorten cuts s to n characters, the last three being "..."; n of 0 keeps s whole.
func shorten(s string, n int) string {
	if n == 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-3, 0)]) + "..."
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
