package redisconn

import (
	"fmt"

	"github.com/hibiken/asynq"
)

// Settings are a process's Redis settings: redis.url, and either
// redis.sentinel.master with redis.sentinel.addrs or redis.cluster.addrs.
// With Sentinel or Cluster, URL still gives the password, database and TLS
// scheme.
type Settings struct {
	URL            string
	SentinelMaster string
	SentinelAddrs  []string
	ClusterAddrs   []string
}

// Opt is the connection the settings describe: a single server, a Sentinel
// group (Sentinel) or a Cluster (Cluster), the latter two tuned for
// failover.
func (s Settings) Opt() (asynq.RedisConnOpt, error) {
	base, err := asynq.ParseRedisURI(s.URL)
	if err != nil {
		return nil, fmt.Errorf("redis.url: %w", err)
	}
	one, _ := base.(asynq.RedisClientOpt)
	if (s.SentinelMaster == "") != (len(s.SentinelAddrs) == 0) {
		return nil, fmt.Errorf("redis.sentinel: set both redis.sentinel.master and redis.sentinel.addrs, or neither")
	}
	if s.SentinelMaster != "" && len(s.ClusterAddrs) > 0 {
		return nil, fmt.Errorf("redis.cluster.addrs: cannot be combined with redis.sentinel; choose one")
	}
	switch {
	case s.SentinelMaster != "":
		return Sentinel{
			Master: s.SentinelMaster, SentinelAddrs: s.SentinelAddrs,
			Username: one.Username, Password: one.Password, DB: one.DB, TLSConfig: one.TLSConfig,
		}, nil
	case len(s.ClusterAddrs) > 0:
		return Cluster{Addrs: s.ClusterAddrs, Username: one.Username, Password: one.Password, TLSConfig: one.TLSConfig}, nil
	}
	return base, nil
}
