package decide

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package's promise (doc.go), checked on its source: no client-go, no sync (it keeps no
// state and takes no lock), and no clock of its own (the snapshot carries the time).
func TestDecidesWithoutClientGoLocksOrClock(t *testing.T) {
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.ParseComments)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "k8s.io/client-go") || path == "sync" || path == "sync/atomic" {
				t.Errorf("%s imports %s", name, path)
			}
		}
		full, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(full, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					t.Errorf("%s reads the clock (time.%s): use Snapshot.Now", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
