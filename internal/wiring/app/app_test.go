package app

import (
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/intake/redisconn"
)

func TestRedisConn(t *testing.T) {
	t.Parallel()
	opt, err := RedisConn(config.Redis{URL: "redis://:pw@127.0.0.1:6379/3"})
	if c, ok := opt.(asynq.RedisClientOpt); err != nil || !ok || c.DB != 3 || c.Password != "pw" {
		t.Fatalf("single: %#v %v", opt, err)
	}
	opt, err = RedisConn(config.Redis{URL: "redis://:pw@x:6379/2", Sentinel: config.RedisSentinel{Master: "m", Addrs: []string{"s1:26379"}}})
	if f, ok := opt.(redisconn.Sentinel); err != nil || !ok || f.Master != "m" || f.DB != 2 || f.Password != "pw" {
		t.Fatalf("sentinel: %#v %v", opt, err)
	}
	opt, err = RedisConn(config.Redis{URL: "redis://x:6379/0", Cluster: config.RedisCluster{Addrs: []string{"n1:6379", "n2:6379"}}})
	if c, ok := opt.(redisconn.Cluster); err != nil || !ok || len(c.Addrs) != 2 {
		t.Fatalf("cluster: %#v %v", opt, err)
	}
	if _, err := RedisConn(config.Redis{URL: "redis://x:6379/0", Sentinel: config.RedisSentinel{Master: "m"}}); err == nil || !strings.Contains(err.Error(), "redis.sentinel") {
		t.Fatalf("master without addrs: %v", err)
	}
}
