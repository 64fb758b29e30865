<section id="${anchor}">
<h2>${heading}</h2>
${intro}
${body}
</section>
