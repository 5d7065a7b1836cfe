package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The version line kube-apiserver prints is what picks a release's gates; one the build script
// did not stamp is refused with the command that mends it.
func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Release
		wantErr string
	}{
		{line: "Kubernetes v1.37.2\n", want: Release{Minor: 37, Version: "v1.37.2"}},
		{line: "Kubernetes v1.29.15", want: Release{Minor: 29, Version: "v1.29.15"}},
		{line: "Kubernetes v1.38.0-alpha.1", want: Release{Minor: 38, Version: "v1.38.0-alpha.1"}},
		{line: "Kubernetes v0.0.0-master+$Format:%H$", wantErr: "make control-plane"},
	} {
		got, err := parseRelease(tc.line)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.line)
			continue
		}
		require.NoError(t, err, tc.line)
		require.Equal(t, tc.want, got)
	}
}
