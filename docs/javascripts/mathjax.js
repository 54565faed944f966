// MathJax 3 configuration for pymdownx.arithmatex (generic mode): typeset only the maths arithmatex marked.
// Without network access (MathJax comes from a CDN) the formulas stay as readable TeX between \( \) and \[ \].
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
