empty single line comment
{# #}
filled single line comment
{# testing single line comment #}
filled multilines comment
{# 
  testing single line comment
#}
filled single line comment with valid tags
{# testing single line comment {% if thing %}{% endif %} #}
filled single line comment with invalid tags
{# testing single line comment {% if thing %} #}
filled single line comment with invalid syntax
{# testing single line comment {% if thing('') %}wow{% endif %} #}
end of file
