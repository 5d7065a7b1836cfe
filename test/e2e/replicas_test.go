package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/faultproxy"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/testcerts"
	"github.com/lockstep-sched/lockstep/views"
)

// The Deployment's shape, on loopback: kube-scheduler replicas started from the shipped
// lockstep-profile.yaml, each calling a lockstep of its own over mutual TLS, the way the
// lockstep-scheduler pod runs them. The suite's own scheduler has no profile for these tests'
// schedulerName, so only these replicas place their pods.

// profileConfig is the shipped configuration of the Deployment's scheduler.
const profileConfig = "deploy/scheduler-config/lockstep-profile.yaml"

// tlsFiles are the certificates of one test: lockstep's serving pair, the scheduler's client
// pair, and the CA that signed both.
type tlsFiles struct {
	ca                            *testcerts.CA
	caFile, serverCert, serverKey string
	clientCert, clientKey         string
	client                        testcerts.Pair
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA("lockstep-e2e-ca")
	require.NoError(t, err)
	server, err := ca.Server("lockstep")
	require.NoError(t, err)
	client, err := ca.Client("kube-scheduler")
	require.NoError(t, err)
	f := tlsFiles{ca: ca, client: client}
	f.caFile, err = ca.WriteCert(dir, "ca")
	require.NoError(t, err)
	f.serverCert, f.serverKey, err = server.Write(dir, "tls")
	require.NoError(t, err)
	f.clientCert, f.clientKey, err = client.Write(dir, "client")
	require.NoError(t, err)
	return f
}

// replica is one scheduler and its lockstep, as one pod of the Deployment would run them.
type replica struct {
	host     string
	lockstep *harness.Lockstep
	verbs    string // https://127.0.0.1:<port>
	sched    *cluster.Replica
}

// kill ends both at once, as a node failure would.
func (r *replica) kill() {
	r.sched.Kill()
	r.lockstep.Kill()
}

// lease, when not empty, is the Lease in the scenario's namespace the replicas elect a leader with.
func (s *scenario) startReplica(certs tlsFiles, host, schedulerName, lease string) *replica {
	s.t.Helper()
	port, err := cluster.FreePort()
	require.NoError(s.t, err)
	debugPort, err := cluster.FreePort()
	require.NoError(s.t, err)
	r := &replica{host: host, verbs: "https://127.0.0.1:" + strconv.Itoa(port)}
	args := []string{
		"--kubeconfig", env.cluster.AdminKubeconfig,
		"--tls-cert-file", certs.serverCert, "--tls-private-key-file", certs.serverKey, "--client-ca-file", certs.caFile,
		"--scheduler-http-timeout", "10s", "--bind-wait", "8s", "-v", "2",
	}
	if lease != "" {
		args = append(args, "--leader-election-lease", s.ns+"/"+lease, "--leader-identity", host)
	}
	r.lockstep = harness.NewLockstep(env.lockstep.Binary, filepath.Join(s.t.TempDir(), host+".log"), port, debugPort, args...)
	require.NoError(s.t, r.lockstep.Start(s.ctx))
	config := s.replicaConfig(certs, r.verbs, schedulerName, lease)
	r.sched, err = env.cluster.StartReplica(s.ctx, cluster.ReplicaOptions{Name: s.ns + "-" + host, Config: config, Hostname: host})
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.t.Logf("%s's lockstep log tail:\n%s\n%s's scheduler log tail:\n%s", host, r.lockstep.Tail(4000), host, r.sched.LogTail(30))
		}
		r.sched.Stop()
		r.lockstep.Kill()
	})
	return r
}

// replicaConfig is the shipped lockstep-profile.yaml with what differs on loopback: the
// kubeconfig, one profile of the test's own name, the extender's port and certificate files,
// and a short leader election (or none).
func (s *scenario) replicaConfig(certs tlsFiles, verbs, schedulerName, lease string) []byte {
	s.t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, profileConfig))
	require.NoError(s.t, err)
	var doc map[string]any
	require.NoError(s.t, yaml.Unmarshal(raw, &doc))
	doc["clientConnection"] = map[string]any{"kubeconfig": env.cluster.AdminKubeconfig}
	doc["profiles"] = []any{map[string]any{"schedulerName": schedulerName}}
	election := map[string]any{"leaderElect": false}
	if lease != "" {
		// Seconds rather than the default 15s, so that the hand-over shows within a test.
		election = map[string]any{"leaderElect": true, "resourceNamespace": s.ns, "resourceName": lease,
			"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}
	}
	doc["leaderElection"] = election
	extenders := doc["extenders"].([]any)
	require.Len(s.t, extenders, 1)
	e := extenders[0].(map[string]any)
	shipped, err := url.Parse(e["urlPrefix"].(string))
	require.NoError(s.t, err)
	require.Equal(s.t, "https", shipped.Scheme, "the Deployment's scheduler calls lockstep over TLS")
	require.Equal(s.t, true, e["enableHTTPS"])
	tlsConfig := e["tlsConfig"].(map[string]any)
	for _, k := range []string{"certFile", "keyFile", "caFile"} {
		require.NotEmpty(s.t, tlsConfig[k], "the shipped tlsConfig names %s", k)
	}
	e["urlPrefix"] = verbs
	e["tlsConfig"] = map[string]any{"certFile": certs.clientCert, "keyFile": certs.clientKey, "caFile": certs.caFile}
	out, err := yaml.Marshal(doc)
	require.NoError(s.t, err)
	return out
}

// gangsAt reads one lockstep's /debug/gangs for the scenario's namespace, by gang name.
func (s *scenario) gangsAt(ls *harness.Lockstep) map[string]views.GangStatus {
	var list []views.GangStatus
	_ = json.Unmarshal([]byte(s.rawGangsAt(ls)), &list)
	out := map[string]views.GangStatus{}
	for _, g := range list {
		out[g.Name] = g
	}
	return out
}

// The real kube-scheduler calls lockstep over mutual TLS with the shipped configuration and
// places a gang through it; a client without the CA's certificate is refused the verbs, while
// the probes stay open.
func TestSchedulerCallsLockstepOverMutualTLS(t *testing.T) {
	s := newScenario(t, 2, 4)
	certs := newTLSFiles(t)
	schedulerName := "lockstep-" + s.ns
	r := s.startReplica(certs, "tls", schedulerName, "")
	for i := range 4 {
		p := podSpec{name: fmt.Sprintf("ring-%d", i), gpus: 2, gang: "ring", minAvailable: 4}.pod()
		p.Spec.SchedulerName = schedulerName
		s.create(p)
	}
	s.eventually(60*time.Second, "the gang bound through the scheduler over mutual TLS", func() bool { return s.boundIn("ring-") == 4 })
	s.binds.assertNeverPartial(t, "ring", 4)

	post := func(hc *http.Client, path string) (int, string, error) {
		resp, err := hc.Post(r.verbs+path, "application/json", strings.NewReader(`{"podName":"ring-0","podNamespace":"`+s.ns+`","node":"`+s.nodes[0]+`"}`))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	client := func(cert *testcerts.Pair) *http.Client {
		cfg := &tls.Config{RootCAs: certs.ca.Pool(), MinVersion: tls.VersionTLS12}
		if cert != nil {
			c, err := cert.TLS()
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}

	code, body, err := post(client(nil), "/bind")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "client certificate required")

	stranger, err := testcerts.NewCA("someone-else")
	require.NoError(t, err)
	strangerPair, err := stranger.Client("kube-scheduler")
	require.NoError(t, err)
	code, body, err = post(client(&strangerPair), "/bind")
	require.True(t, err != nil || code == http.StatusForbidden, "a certificate another CA signed is refused: %d %s %v", code, body, err)

	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := plain.Post("http://"+strings.TrimPrefix(r.verbs, "https://")+"/bind", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port is refused")

	for _, probe := range []string{"/healthz", "/readyz"} {
		resp, err := client(nil).Get(r.verbs + probe)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s answers without a client certificate", probe)
	}
	// What was refused changed nothing: the gang is bound as it was.
	require.Equal(t, 4, s.boundIn("ring-"))
}

// leaseHolder is the holder identity of the scenario's Lease, "" before there is one.
func (s *scenario) leaseHolder(name string) string {
	l, err := env.client.CoordinationV1().Leases(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leading reads lockstep_leading from a lockstep's /metrics: "1", "0", or "" when unread.
func leading(ls *harness.Lockstep) string {
	v, found, err := ls.Metric(context.Background(), "lockstep_leading")
	if err != nil || !found {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Two schedulers elect a leader, each with its lockstep. The leader is killed (scheduler and
// lockstep, kill -9) while a gang is half reserved: two members are held at bind in the leader's
// lockstep, two cannot be placed yet. The standby takes over and the gang binds whole under it;
// at no moment is any of it bound partially.
func TestLeaderKilledMidGangHandsOverWithoutPartialGang(t *testing.T) {
	s := newScenario(t, 2, 4)
	certs := newTLSFiles(t)
	schedulerName, lease := "lockstep-"+s.ns, "lockstep-scheduler"
	replicas := map[string]*replica{}
	for _, host := range []string{"replica-a", "replica-b"} {
		replicas[host] = s.startReplica(certs, host, schedulerName, lease)
	}
	var leader, standby *replica
	s.eventually(30*time.Second, "a leader elected", func() bool {
		host, _, _ := strings.Cut(s.leaseHolder(lease), "_")
		leader = replicas[host]
		return leader != nil
	})
	for _, r := range replicas {
		if r != leader {
			standby = r
		}
	}
	s.eventually(10*time.Second, "each lockstep to know whether its scheduler leads", func() bool {
		return leading(leader.lockstep) == "1" && leading(standby.lockstep) == "0"
	})

	ready := behindBeacon("lockstep.e2e/ha", "ready")
	for i := range 4 {
		ps := podSpec{name: fmt.Sprintf("ring-%d", i), gpus: 2, gang: "ring", minAvailable: 4}
		if i >= 2 {
			ps.affinity = ready // no node has a beacon yet: these two never reach lockstep
		}
		p := ps.pod()
		p.Spec.SchedulerName = schedulerName
		s.create(p)
	}
	s.eventually(60*time.Second, "two members held at bind in the leader's lockstep", func() bool {
		waiting := 0
		for _, m := range s.gangsAt(leader.lockstep)["ring"].Members {
			if m.State == "WaitingForQuorum" {
				waiting++
			}
		}
		return waiting == 2
	})
	require.Zero(t, s.boundIn("ring-"))
	s.eventually(10*time.Second, "the standby's lockstep to know the gang's members (its informers are warm)", func() bool {
		g := s.gangsAt(standby.lockstep)["ring"]
		return len(g.Members) == 4 && g.Phase == views.PhaseWaiting
	})

	killed := time.Now()
	leader.kill()
	s.openNodes("lockstep.e2e/ha", "ready")
	s.eventually(30*time.Second, "the standby's scheduler to take the Lease", func() bool {
		return strings.HasPrefix(s.leaseHolder(lease), standby.host+"_")
	})
	handOver := time.Since(killed)
	s.eventually(60*time.Second, "the gang bound whole under the new leader", func() bool { return s.boundIn("ring-") == 4 })
	bound := time.Since(killed)
	s.binds.assertNeverPartial(t, "ring", 4)
	require.Equal(t, "1", leading(standby.lockstep), "the new leader's lockstep knows it leads")
	t.Logf("hand-over: the standby held the Lease %s after the kill (leaseDuration 4s), the gang was bound %s after it",
		handOver.Round(10*time.Millisecond), bound.Round(10*time.Millisecond))
}

// writesFor matches every write (anything but a read) in namespace ns, and every write of the
// cluster-scoped Volcano Queue queue, its status or the object itself.
func writesFor(ns, queue string) faultproxy.Matcher {
	queuePath := "/apis/scheduling.volcano.sh/v1beta1/queues/" + queue
	return func(r *http.Request) bool {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return false
		}
		return strings.Contains(r.URL.Path, "/namespaces/"+ns+"/") || r.URL.Path == queuePath || r.URL.Path == queuePath+"/status"
	}
}

// Two schedulers elect a leader, each with its lockstep, as in
// TestLeaderKilledMidGangHandsOverWithoutPartialGang, and place gangs of a Volcano Queue capped
// at 4 GPUs: two gangs of 2 fill it, a third waits whole. The leader is killed (scheduler and
// lockstep, kill -9). The new leader's lockstep counts what the queue holds as the old one did
// (nothing lost, nothing counted twice), keeps the cap (the waiting gang and a new one wait
// whole), writes the Queue's status.allocated, which only a leader writes, and releases what a
// gang bound under the old leader held once it ends. (No peer suite has this case; it follows
// TestQueueAccountingSurvivesRestart.)
func TestQueueAccountingSurvivesLeaderHandOver(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	certs := newTLSFiles(t)
	schedulerName, lease := "lockstep-"+s.ns, "lockstep-scheduler"
	q := s.queueName("kept")
	key := volcanoKey(q)
	// The suite's own lockstep watches every pod, though its scheduler places none of these: it
	// runs without leader election, so it would write the Queue's status.allocated too, and with
	// --queue-reclaim it plans the gangs the replicas' schedulers turn away (writing their pods'
	// conditions and PodGroups' status). It is no part of the Deployment's shape under test:
	// refused every write in the test's namespace and to the Queue, it leaves them to the
	// replicas, and status.allocated to their leader.
	refused := s.addFault(&faultproxy.Rule{Match: writesFor(s.ns, q), Fault: faultproxy.Status(http.StatusForbidden, 0)})
	replicas := map[string]*replica{}
	for _, host := range []string{"replica-a", "replica-b"} {
		replicas[host] = s.startReplica(certs, host, schedulerName, lease)
	}
	s.createVolcanoQueue(builders.VolcanoQueue(q).Capability(gpuRes, "4"))
	var leader, standby *replica
	s.eventually(30*time.Second, "a leader elected", func() bool {
		host, _, _ := strings.Cut(s.leaseHolder(lease), "_")
		leader = replicas[host]
		return leader != nil
	})
	for _, r := range replicas {
		if r != leader {
			standby = r
		}
	}
	s.eventually(10*time.Second, "each lockstep to know whether its scheduler leads", func() bool {
		return leading(leader.lockstep) == "1" && leading(standby.lockstep) == "0"
	})
	for _, r := range replicas {
		s.eventually(30*time.Second, r.host+"'s lockstep to show the queue", func() bool { return s.queueAt(r.lockstep, key).Defined })
	}

	s.volcanoGangScheduledBy("one", q, 2, 2, schedulerName)
	s.volcanoGangScheduledBy("two", q, 2, 2, schedulerName)
	s.eventually(90*time.Second, "both gangs bound under the leader, filling the queue", func() bool { return s.boundInGroups([]string{"one", "two"}) == 4 })
	s.binds.assertNeverPartial(t, "one", 2)
	s.binds.assertNeverPartial(t, "two", 2)
	holds4 := func(gangName string) string {
		return fmt.Sprintf("gang %s/%s waits for its queue: %s: nvidia.com/gpu would go over its limit of 4: it holds 4 and gang %s/%s's quorum asks 2 more",
			s.ns, gangName, key, s.ns, gangName)
	}
	waitsAt := func(r *replica, gangName string) bool {
		g, ok := s.gangsAt(r.lockstep)[gangName]
		return ok && (g.Phase == views.PhaseWaiting || g.Phase == views.PhaseHolding) && strings.Contains(g.Reason, holds4(gangName))
	}
	s.volcanoGangScheduledBy("three", q, 2, 2, schedulerName)
	s.eventually(60*time.Second, "gang three to wait on the full queue at the leader", func() bool { return waitsAt(leader, "three") })
	for _, r := range replicas {
		s.eventually(30*time.Second, r.host+"'s lockstep to count the queue's 4 GPUs", func() bool {
			v := s.queueAt(r.lockstep, key)
			return gpus(v.Allocated) == "4" && gpus(v.Used) == "4" && gpus(v.Held) == "0"
		})
	}
	before := s.queueAt(leader.lockstep, key)
	require.Equal(t, before.Allocated, s.queueAt(standby.lockstep, key).Allocated, "the standby counts as the leader does")
	s.eventually(30*time.Second, "the leader to write the Queue's status.allocated: 4 GPUs", func() bool { return s.volcanoQueueAllocatedGPUs(q) == "4" })
	t.Logf("the suite's lockstep was refused %d writes", refused.Hits())

	killed := time.Now()
	leader.kill()
	s.eventually(30*time.Second, "the standby's scheduler to take the Lease", func() bool {
		return strings.HasPrefix(s.leaseHolder(lease), standby.host+"_")
	})
	s.eventually(10*time.Second, "the new leader's lockstep to know it leads", func() bool { return leading(standby.lockstep) == "1" })
	t.Logf("hand-over: the standby led %s after the kill", time.Since(killed).Round(10*time.Millisecond))
	after := s.queueAt(standby.lockstep, key)
	require.Equal(t, before.Allocated, after.Allocated, "allocated at the old leader: %s\nat the new one: %s", before, after)
	require.Equal(t, before.Used, after.Used)
	require.Equal(t, "0", gpus(after.Held), "%s", after)

	// The cap holds under the new leader, for the gang that waited and a new one alike.
	s.volcanoGangScheduledBy("four", q, 2, 2, schedulerName)
	s.eventually(60*time.Second, "gangs three and four to wait on the full queue at the new leader", func() bool {
		return waitsAt(standby, "three") && waitsAt(standby, "four")
	})
	s.never(5*time.Second, "a gang bound over the queue's capability", func() bool { return s.boundInGroups([]string{"three", "four"}) > 0 })
	require.Equal(t, before.Allocated, s.queueAt(standby.lockstep, key).Allocated, "still counted once")

	// status.allocated is the new leader's to write now: written over, it is written back.
	s.patchQueue(q, `{"status":{"allocated":{"nvidia.com/gpu":"0","cpu":"0","memory":"0"}}}`, "status")
	s.eventually(30*time.Second, "the new leader to write status.allocated back to 4 GPUs", func() bool { return s.volcanoQueueAllocatedGPUs(q) == "4" })

	// A gang bound under the old leader ends: what it held is released, once; one of the two
	// waiting gangs takes its place, whole, and the other still waits, whole.
	s.deletePod("one-0")
	s.deletePod("one-1")
	var next, other string
	s.eventually(90*time.Second, "a waiting gang bound in the room gang one left", func() bool {
		for _, pair := range [][2]string{{"three", "four"}, {"four", "three"}} {
			if s.boundInGroup(pair[0]) == 2 {
				next, other = pair[0], pair[1]
				return true
			}
		}
		return false
	})
	s.binds.assertNeverPartial(t, next, 2)
	s.never(5*time.Second, "gang "+other+" bound over the queue's capability", func() bool { return s.boundInGroup(other) > 0 })
	s.eventually(30*time.Second, "the new leader to count the queue full again, 4 GPUs", func() bool {
		v := s.queueAt(standby.lockstep, key)
		return gpus(v.Allocated) == "4" && gpus(v.Used) == "4"
	})

	// What the queue holds goes down, and status.allocated follows.
	s.deletePod(other + "-0")
	s.deletePod(other + "-1")
	s.deletePod("two-0")
	s.deletePod("two-1")
	s.eventually(30*time.Second, "the new leader to count gang "+next+"'s 2 GPUs", func() bool { return gpus(s.queueAt(standby.lockstep, key).Allocated) == "2" })
	s.eventually(30*time.Second, "status.allocated to follow: 2 GPUs", func() bool { return s.volcanoQueueAllocatedGPUs(q) == "2" })
}
