{}: {{ {} is mapping }}
simple.intmap: {{ simple.intmap is mapping }}
[]: {{ [] is mapping }}
42: {{ 42 is mapping }}
