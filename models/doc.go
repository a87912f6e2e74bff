// Package models holds zerohop's shipped reference model(s), their
// generator and model card.
package models
