{{ ""|wordwrap(2) }}
{% filter wordwrap(5) %}Lorem ipsum dolor sit amet, consectetur adipisici elit, sed eiusmod tempor incidunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation{% endfilter %}
