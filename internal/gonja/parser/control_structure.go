package parser

import (
	"fmt"

	log "github.com/homingdev/homing/internal/gonja/logging"

	"github.com/homingdev/homing/internal/gonja/nodes"
	"github.com/homingdev/homing/internal/gonja/tokens"
)

type ControlStructureParser func(parser *Parser, args *Parser) (nodes.ControlStructure, error)

func (p *Parser) ParseControlStructureBlock() (*nodes.ControlStructureBlock, error) {
	if log.Enabled() {
		log.WithFields(log.Fields{
			"current": p.Current(),
		}).Trace("ParseControlStructureBlock")
	}

	begin := p.Match(tokens.BlockBegin)
	if begin == nil {
		return nil, fmt.Errorf(`Expected "%s" got "%s"`, p.Config.BlockStartString, p.Current())
	}

	name := p.Match(tokens.Name)
	if name == nil {
		return nil, p.Error("Expected a controlStructure name here", p.Current())
	}

	controlStructureParser, exists := p.controlStructures.Get(name.Val)
	if !exists {
		return nil, p.Error(fmt.Sprintf("ControlStructure '%s' not found (or beginning not provided)", name.Val), name)
	}

	if log.Enabled() {
		log.Trace("args")
	}
	var args []*tokens.Token
	for p.Current(tokens.BlockEnd) == nil && !p.Stream().End() {
		if log.Enabled() {
			log.Trace("for args")
		}
		args = append(args, p.Next())
	}
	if log.Enabled() {
		log.Trace("loop ended")
	}

	end := p.Match(tokens.BlockEnd)
	if end == nil {
		return nil, p.Error(fmt.Sprintf(`Expected end of block "%s"`, p.Config.BlockEndString), p.Current())
	}
	if data := p.Current(tokens.Data); data != nil {
		data.Trim = data.Trim || len(end.Val) > 0 && end.Val[0] == '-'
	}

	if log.Enabled() {
		log.WithFields(log.Fields{
			"args": args,
		}).Trace("Matched end block")
	}

	stream := tokens.NewStream(args)
	if log.Enabled() {
		log.WithFields(log.Fields{
			"stream": stream,
		}).Trace("Got stream")
	}
	argParser := NewParser(p.identifier, stream, p.Config, p.Loader, p.controlStructures)
	if log.Enabled() {
		log.Trace("argparser")
	}

	controlStructure, err := controlStructureParser(p, argParser)
	if err != nil {
		return nil, fmt.Errorf(`Unable to parse controlStructure "%s": %w`, name.Val, err)
	}
	if log.Enabled() {
		log.Trace("got controlStructure and return")
	}
	return &nodes.ControlStructureBlock{
		Location:         begin,
		Name:             name.Val,
		ControlStructure: controlStructure,
	}, nil
}
