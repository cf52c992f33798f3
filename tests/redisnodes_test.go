package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisNode is a redis-server or redis-sentinel process a failover test
// starts on its own loopback port, kills and cleans up.
type redisNode struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

func (n *redisNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// startRedisNode runs bin (redis-server or redis-sentinel) with args on
// port, in the foreground, and waits until it answers PING.
func startRedisNode(t *testing.T, bin string, port int, args ...string) *redisNode {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s is not installed (scripts/services.sh installs it): %v", bin, err)
	}
	n := &redisNode{port: port, done: make(chan struct{}), out: &syncBuffer{}}
	n.cmd = exec.Command(path, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Kill()
			<-n.done
		}
		if t.Failed() {
			t.Logf("%s on %d output:\n%s", bin, port, n.out.String())
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer func() { _ = rdb.Close() }()
	eventually(t, bin+" to answer", func() (bool, string) {
		select {
		case <-n.done:
			t.Fatalf("%s exited at start:\n%s", bin, n.out.String())
		default:
		}
		err := rdb.Ping(context.Background()).Err()
		return err == nil, fmt.Sprint(err)
	})
	return n
}

// kill SIGKILLs the node: a crash, with no chance to hand over.
func (n *redisNode) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill redis on %d: %v", n.port, err)
	}
	<-n.done
}

// loopbackPorts finds count free loopback ports; with bus, port+10000 is
// free too (Redis Cluster's bus port).
func loopbackPorts(t *testing.T, count int, bus bool) []int {
	t.Helper()
	free := func(p int) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		_ = l.Close()
		return true
	}
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < count; tries++ {
		if tries > 10000 {
			t.Fatalf("found only %d free loopback ports", len(ports))
		}
		p := 20000 + rand.IntN(10000)
		if seen[p] || !free(p) || (bus && !free(p+10000)) {
			continue
		}
		seen[p] = true
		ports = append(ports, p)
	}
	return ports
}

// startCluster starts a Redis Cluster of three masters and three replicas,
// with a 2 s node timeout, and waits until every node reports it healthy.
func startCluster(t *testing.T) []*redisNode {
	t.Helper()
	dir := t.TempDir()
	var nodes []*redisNode
	var addrs []string
	for _, p := range loopbackPorts(t, 6, true) {
		nd := filepath.Join(dir, strconv.Itoa(p))
		if err := exec.Command("mkdir", "-p", nd).Run(); err != nil {
			t.Fatal(err)
		}
		n := startRedisNode(t, "redis-server", p, "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no", "--dir", nd,
			"--repl-diskless-sync-delay", "0")
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr())
	}
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		waitClusterOK(t, n, time.Minute)
		waitReplicaSynced(t, n)
	}
	return nodes
}

// waitReplicaSynced waits, when n is a replica, until its link to its
// master is up: a replica that never synced refuses to take over.
func waitReplicaSynced(t *testing.T, n *redisNode) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer func() { _ = rdb.Close() }()
	within(t, time.Minute, "replica "+n.addr()+" in sync", func() (bool, string) {
		info, err := rdb.Info(context.Background(), "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up"), info
	})
}

// waitClusterOK waits until n sees every slot served.
func waitClusterOK(t *testing.T, n *redisNode, timeout time.Duration) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer func() { _ = rdb.Close() }()
	within(t, timeout, "cluster_state:ok on "+n.addr(), func() (bool, string) {
		info, err := rdb.ClusterInfo(context.Background()).Result()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(info, "cluster_state:ok"), info
	})
}

// clusterMasterOf is the address of the master serving key's slot, as node
// at sees it (CLUSTER SHARDS).
func clusterMasterOf(t *testing.T, at, key string) string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: at})
	defer func() { _ = rdb.Close() }()
	ctx := context.Background()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > slot || slot > r.End {
				continue
			}
			// The master as node at sees it: the online one once a replica
			// was promoted, the failed one until then.
			master := ""
			for _, n := range sh.Nodes {
				if n.Role == "master" && (master == "" || n.Health == "online") {
					master = fmt.Sprintf("%s:%d", n.IP, n.Port)
				}
			}
			if master != "" {
				return master
			}
		}
	}
	t.Fatalf("no node serves slot %d of %s", slot, key)
	return ""
}
