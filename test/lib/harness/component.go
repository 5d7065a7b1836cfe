package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// checkBinary fails, saying which make target builds it, when BinDir has no executable binary.
func checkBinary(binDir, binary, makeTarget string) error {
	st, err := os.Stat(filepath.Join(binDir, binary))
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("harness: %s not found in %s: run `make %s`", binary, binDir, makeTarget)
	}
	return nil
}

// logOffset is the size of a component's log before it starts again: a component's log is
// appended to, so this is where the new run's output begins.
func logOffset(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// logSince returns a component's log from offset from.
func logSince(path string, from int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// hasLine says whether some line of text holds both a and b.
func hasLine(text []byte, a, b string) bool {
	for line := range bytes.Lines(text) {
		if bytes.Contains(line, []byte(a)) && bytes.Contains(line, []byte(b)) {
			return true
		}
	}
	return false
}
