package gang

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The locking rule (doc.go), checked on the package's own source so that a new site cannot break
// it unnoticed:
//   - every Lock or RLock is followed at once by the deferred Unlock or RUnlock of the same
//     mutex, so that a panic in between (net/http recovers a handler's) cannot leave it taken;
//     Manager.locked and Manager.reading are the way to hold it for part of a function;
//   - a function whose name ends in Locked is called only where the manager's lock is held for
//     writing: from another such function, inside a function literal handed to m.locked, or in a
//     function that begins by taking the lock.
func TestLockingRule(t *testing.T) {
	files := parsePackage(t)
	for name, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if block, ok := n.(*ast.BlockStmt); ok {
				checkLocksDeferUnlock(t, name, block)
			}
			return true
		})
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				checkLockedCalls(t, name, fn.Name.Name, fn.Body, strings.HasSuffix(fn.Name.Name, "Locked") || takesLock(fn.Body))
			}
		}
	}
}

func parsePackage(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		out[name] = f
	}
	require.NotEmpty(t, out)
	return out
}

// checkLocksDeferUnlock finds x.Lock() and x.RLock() statements in block and requires the next
// statement to be defer x.Unlock() or defer x.RUnlock().
func checkLocksDeferUnlock(t *testing.T, file string, block *ast.BlockStmt) {
	for i, stmt := range block.List {
		mutex, method := lockCall(stmt)
		if mutex == "" {
			continue
		}
		want := map[string]string{"Lock": "Unlock", "RLock": "RUnlock"}[method]
		ok := false
		if i+1 < len(block.List) {
			if d, isDefer := block.List[i+1].(*ast.DeferStmt); isDefer {
				if sel, isSel := d.Call.Fun.(*ast.SelectorExpr); isSel {
					ok = sel.Sel.Name == want && exprString(sel.X) == mutex
				}
			}
		}
		if !ok {
			t.Errorf("%s: %s.%s() is not followed by defer %s.%s(): use Manager.locked or Manager.reading, or defer the unlock", file, mutex, method, mutex, want)
		}
	}
}

func lockCall(stmt ast.Stmt) (mutex, method string) {
	es, ok := stmt.(*ast.ExprStmt)
	if !ok {
		return "", ""
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return "", ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Lock" && sel.Sel.Name != "RLock") {
		return "", ""
	}
	return exprString(sel.X), sel.Sel.Name
}

// checkLockedCalls requires every call of a ...Locked function in body to be where the lock is
// held: held says whether it is at the start of body.
func checkLockedCalls(t *testing.T, file, fn string, body ast.Node, held bool) {
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "locked" && len(call.Args) == 1 {
			if lit, ok := call.Args[0].(*ast.FuncLit); ok {
				checkLockedCalls(t, file, fn, lit.Body, true)
				return false
			}
		}
		if name := calledName(call); strings.HasSuffix(name, "Locked") && !held {
			t.Errorf("%s: %s calls %s without the manager's lock held (call it from a ...Locked function or inside m.locked)", file, fn, name)
		}
		return true
	})
}

// takesLock reports whether a function body begins with m.mu.Lock() and its deferred unlock.
func takesLock(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	mutex, method := lockCall(body.List[0])
	return mutex == "m.mu" && method == "Lock"
}

func calledName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return ""
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.UnaryExpr:
		return x.Op.String() + exprString(x.X)
	}
	return "?"
}
