package gonja

import "github.com/homingdev/homing/internal/gonja/config"

type Config config.Config

var NewConfig = config.New
