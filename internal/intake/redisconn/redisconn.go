// Package redisconn builds the Redis connections of every Homing process
// (asynq's server, client, scheduler and inspector, and Homing's own
// clients), tuned so that a process works again within seconds of a Redis
// Cluster or Sentinel failover.
//
// asynq's own RedisClusterClientOpt and RedisFailoverClientOpt leave
// go-redis at its defaults, which were measured (tests/failover_test.go)
// to keep a process dialling a dead cluster master for 45 s and more after
// its replica took over: the cluster client refreshes its slot map only
// every 60 s, and each command to the dead node spends five dial attempts
// before it fails. Cluster and Sentinel here are the same options with the
// failover settings below; both satisfy asynq.RedisConnOpt.
package redisconn

import (
	"crypto/tls"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// StateReload is how stale a cluster client's slot map may get before a
	// command reloads it (in the background, from any live node). A
	// promoted replica is used at most this long after it took over; each
	// reload costs one CLUSTER SLOTS per client.
	StateReload = 2 * time.Second

	// DialTimeout bounds one connection attempt. go-redis's 5 s would hold
	// a worker slot that long for every command sent to a host that is
	// gone without a reset (a crashed machine rather than a crashed
	// process).
	DialTimeout = 2 * time.Second

	// DialerRetries is how many times one command dials a node before it
	// fails. go-redis's 5 (with backoff) makes each command to a dead node
	// cost half a second or more; once is enough, since the command itself
	// is retried (by asynq, the relay or the sweeper).
	DialerRetries = 1
)

// Cluster connects to a Redis Cluster through any of Addrs.
type Cluster struct {
	Addrs     []string
	Username  string
	Password  string
	TLSConfig *tls.Config
}

// MakeRedisClient returns a *redis.ClusterClient (asynq.RedisConnOpt).
func (c Cluster) MakeRedisClient() any {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      c.Addrs,
		Username:                   c.Username,
		Password:                   c.Password,
		TLSConfig:                  c.TLSConfig,
		ClusterStateReloadInterval: StateReload,
		DialTimeout:                DialTimeout,
		DialerRetries:              DialerRetries,
	})
}

// Sentinel connects to the primary that Redis Sentinel names Master.
type Sentinel struct {
	Master        string
	SentinelAddrs []string
	Username      string
	Password      string
	DB            int
	TLSConfig     *tls.Config
}

// MakeRedisClient returns a failover *redis.Client (asynq.RedisConnOpt).
func (s Sentinel) MakeRedisClient() any {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.Master,
		SentinelAddrs: s.SentinelAddrs,
		Username:      s.Username,
		Password:      s.Password,
		DB:            s.DB,
		TLSConfig:     s.TLSConfig,
		DialTimeout:   DialTimeout,
		DialerRetries: DialerRetries,
	})
}
