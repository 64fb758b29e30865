<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="${generator}">
<title>${title}</title>
<style>
${style}
</style>
</head>
<body>
<header class="page-head">
<h1>${heading}</h1>
<p class="subtitle">${subtitle}</p>
<nav aria-label="sections">${navigation}</nav>
</header>
<main>
<section id="summary" class="summary" aria-label="summary">
${summary}
</section>
${sections}
</main>
<footer class="page-foot">
${footer}
</footer>
</body>
</html>
