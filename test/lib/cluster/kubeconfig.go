package cluster

import (
	"fmt"
	"path/filepath"
	"regexp"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// KubeconfigForToken writes WorkDir/kubeconfig-<name>.yaml, which reaches this cluster's
// kube-apiserver (trusting its CA) and authenticates with the bearer token, e.g. a ServiceAccount
// token from the TokenRequest API, so a test can run lockstep with only the shipped RBAC. It
// returns the file's path; a second call with the same name overwrites the file.
func (c *Cluster) KubeconfigForToken(name, token string) (string, error) {
	if name == "" || token == "" {
		return "", fmt.Errorf("cluster: KubeconfigForToken needs a name and a token")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lockstep-test"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "lockstep-test", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	path := filepath.Join(c.WorkDir, "kubeconfig-"+unsafeFileChars.ReplaceAllString(name, "_")+".yaml")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("cluster: writing kubeconfig for %s: %w", name, err)
	}
	return path, nil
}
