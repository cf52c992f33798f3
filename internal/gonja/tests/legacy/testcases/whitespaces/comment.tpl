left   {#- some multiline
comment
#} indent
right {# some comment -#}
indent